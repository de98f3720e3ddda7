"""Data-Juicer's LLM-backed ops, run against any OpenAI-compatible chat endpoint.

Each op lives in the module named after it (``calibrate_qa_mapper.py``...) and keeps Data-Juicer's
parameters, prompt templates and output patterns.  The machinery is in ``api/``: the HTTP client
(retries with backoff, usage), where the endpoint comes from (params, environment, or a
``serve_llm`` node's Report), the shared parameters, and the op bases that run a batch's requests
concurrently, quarantine a row whose answer does not parse (with the raw answer) and count
requests, retries, parse failures and tokens into the node's ledger entry.
"""
