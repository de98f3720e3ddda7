"""EDGAR document text: the line-level cleanup behind edgar_html_to_text."""
