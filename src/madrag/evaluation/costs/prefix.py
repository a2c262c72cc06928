"""How much of each prompt repeats an earlier prompt of the same essay: what a server with prefix caching
(vLLM, llama.cpp server) can reuse instead of recomputing."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from madrag.records import AgentRecord


def rendered(record: AgentRecord) -> str:
    """A call's prompt as one string, in message order (role markers included, as a chat template would)."""
    return "".join(f"<{m.role}>{m.content}" for m in record.messages)


@dataclass(frozen=True)
class PrefixStats:
    """Prompt characters of a run's calls, and how many of them repeat an earlier prompt's start."""

    calls: int
    prompt_chars: int
    shared_chars: int  # characters of each prompt that an earlier prompt of the same essay already began with

    @property
    def shared_fraction(self) -> float:
        """The share of prompt characters a prefix cache could reuse; 0 without prompts."""
        return self.shared_chars / self.prompt_chars if self.prompt_chars else 0.0


def prefix_stats(records: Iterable[AgentRecord]) -> PrefixStats:
    """Per essay, in call order: each prompt's longest common prefix with any earlier prompt of that essay."""
    by_essay: dict[str, list[AgentRecord]] = defaultdict(list)
    for record in records:
        if record.messages:
            by_essay[record.essay_id].append(record)
    calls = total = shared = 0
    for essay_records in by_essay.values():
        essay_records.sort(key=lambda r: r.created_at)
        seen: list[str] = []
        for record in essay_records:
            prompt = rendered(record)
            calls += 1
            total += len(prompt)
            shared += max((len(os.path.commonprefix([prompt, earlier])) for earlier in seen), default=0)  # noqa: RUF071
            seen.append(prompt)
    return PrefixStats(calls=calls, prompt_chars=total, shared_chars=shared)
