"""Agent roles: prompt rendering and the recorded agent call."""

from madrag.agents.calls import AgentCall, CallContext
from madrag.agents.prompts import PromptLibrary

__all__ = ["AgentCall", "CallContext", "PromptLibrary"]
