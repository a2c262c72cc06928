"""Essays sent as fields are read in memory (a class of essays in one request writes no file per essay), with
the library's table-row rules and errors that name the essay's place in the request."""

from __future__ import annotations

import tempfile

import pytest

from madrag.errors import InputError
from madrag.rubric import Rubric, Trait
from madrag.server import library

RUBRIC = Rubric(traits=[Trait(name="Ideas", min=0, max=3, levels={s: f"level {s}" for s in range(4)})], prompt="Write.")


def test_fields_are_read_without_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_files(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("an essay given as fields was written to a file")

    monkeypatch.setattr(tempfile, "TemporaryDirectory", no_files)
    monkeypatch.setattr(tempfile, "mkdtemp", no_files)
    essay = library.essay_from_fields({"id": 7, "text": " An essay. ", "Ideas": "2", "fold": 1}, RUBRIC, "essays[0]")
    assert (essay.id, essay.text, essay.rater_scores, essay.fold) == ("7", "An essay.", {"Ideas": [2.0]}, 1)


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"id": "a", "text": "  "}, "essays[3]: essay 'a' is empty"),
        ({"id": "a", "text": "fine", "Ideas": 9}, "essays[3]"),
        ({"text": "no id"}, "essays[3]: needs 'id' and 'text' fields"),
    ],
)
def test_a_refused_essay_is_named_by_its_place(fields: dict[str, object], said: str) -> None:
    with pytest.raises(InputError) as caught:
        library.essay_from_fields(fields, RUBRIC, "essays[3]")
    assert str(caught.value).startswith(said) and "/tmp" not in str(caught.value)
