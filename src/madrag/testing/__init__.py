"""Tools for testing and benchmarking madrag against stand-in backends (not needed to score essays).

``madrag.testing.stub_server``: a local OpenAI-compatible server with a fixed latency and capacity;
``madrag.testing.stub_answers``: its configuration and the canned, role-aware answers it gives.
``madrag.testing.llama_server``: llama.cpp's own C++ OpenAI-compatible server (from the xllamacpp wheel) as a
process, serving a real model.
"""
