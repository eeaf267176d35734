"""The request's middle: from a validated question (or document to summarize) to its answer.

request.py   what is asked: RagQuery, SummarizeQuery (with its RequestOptions:
             service.snapshot.options)
stages/      one module a stage: CacheLookup, Rewrite, Expand, Retrieve, ChunkDocuments,
             Rerank, Grade, Chain (/ai/rag); Fetch, ChunkDocuments, Summarize (/ai/summarize)
pipeline.py  the loop over the stages: timed, within the deadline and the LLM call budget
assemble.py  which stages run, built from one settings snapshot; ask/summarize, the way in
reply.py     Reply (the last LLM request still to go, streamed or whole) and its Answer
"""
