"""One seam per wire format: the answer's fields built once (answer.py), one stream driver
(driver.py) and a renderer per protocol, each with started / progress / delta / final / ended
/ failed, so every protocol carries what its format can hold and maps its own errors.

    answer.py     AnswerFields: sources, usage, timings, grounding, cached, abstained,
                  confidence (UsageOut, ConfidenceOut)
    driver.py     drive(work, renderer): the order, the catching; Work (a Turn, or Ready)
    datafari6.py  Datafari 6.2's RagAPI: RagResponse, its SSE (RagEvents)
    datafari7.py  Datafari 7's AI API: AiResponse, its NDJSON events (AiEvents)
    ndjson.py     Datafari 7's event lines (EventStream)
    openai.py     OpenAI's chat completion and its chunks (Completion)
    mcp.py        the MCP server's answers (AskResult)
"""
