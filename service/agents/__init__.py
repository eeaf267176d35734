"""Datafari 7's agents (action=agentic): an LLM that calls our tools, step by step.

    tools.py    the one tool registry: each tool's name, spec, label and handler (the names:
                service.config.tool_names)
    custom.py   Datafari's custom tools at work (agentic-custom-tools.json, read with the
                config: service.config.custom_tools)
    toolbox.py  what the tools work with: one request's search, questions, documents
    steps.py    how the LLM calls tools (OpenAI's tools API, JSON steps) and how a turn is read
    agent.py    the loop: turns, tool calls, the answer
    choice.py   which agent a request gets

The config reads the tool names and the custom tools file from its own modules, never from
here: the agents import the config, not the other way round.
"""
