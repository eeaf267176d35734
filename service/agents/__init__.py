"""Datafari 7's agents (action=agentic): an LLM that calls our tools, step by step.

    tools.py    the one tool registry: each tool's name, spec, label and handler
    custom.py   Datafari's custom tools (agentic-custom-tools.json, read with the config)
    toolbox.py  what the tools work with: one request's search, questions, documents
    steps.py    how the LLM calls tools (OpenAI's tools API, JSON steps) and how a turn is read
    agent.py    the loop: turns, tool calls, the answer
    choice.py   which agent a request gets

This package's own import is empty on purpose: the config (service.config) reads the tool
names and the custom tools, so importing the package must not import what needs the config.
"""
