"""The pipelines service: an HTTP API (on Ray Serve) that validates, submits and watches pipeline
runs, and the run page built on each run's ledger.

Its state lives on disk, never only in a replica's memory: each run's record under the runs root
(``.service/runs/<id>.json``), the run directory the job writes (events, ledger, logs, rejects),
and the cluster's Jobs API.  A restarted server, or a second replica, reads the same answers.
"""
