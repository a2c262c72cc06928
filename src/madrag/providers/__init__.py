"""LLM backends behind one interface (:class:`Provider`), the call policy around them, and the specs that name
and build them (:mod:`madrag.providers.spec`). This package re-exports the public names."""

from __future__ import annotations

from madrag.providers.backends import BackendOptions, BackendTraits, backend_kinds, option, register_backend
from madrag.providers.base import (
    Capabilities,
    ChatRequest,
    ChatResponse,
    Message,
    Provider,
    TokenLogprob,
    TopLogprob,
    Usage,
)
from madrag.providers.cache import ResponseCache
from madrag.providers.fake import FakeProvider, FakeReply
from madrag.providers.policy import ManagedProvider, RetryPolicy
from madrag.providers.spec import ProviderSpec, make_provider, managed, parse_role_provider, spec_identity

__all__ = [
    "BackendOptions",
    "BackendTraits",
    "Capabilities",
    "ChatRequest",
    "ChatResponse",
    "FakeProvider",
    "FakeReply",
    "ManagedProvider",
    "Message",
    "Provider",
    "ProviderSpec",
    "ResponseCache",
    "RetryPolicy",
    "TokenLogprob",
    "TopLogprob",
    "Usage",
    "backend_kinds",
    "make_provider",
    "managed",
    "option",
    "parse_role_provider",
    "register_backend",
    "spec_identity",
]
