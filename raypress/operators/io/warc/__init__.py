"""WARC: the byte streams and record parsing behind read_warc, and packaging a local HTML site as a WARC."""
