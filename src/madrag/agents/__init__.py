"""Agent roles: prompt rendering and the recorded agent call."""
