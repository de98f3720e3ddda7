"""EDGAR's SGML submission files: splitting a filing into its header and documents (for read_edgar)."""
