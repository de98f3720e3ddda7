"""Sniffing what bytes are: a file's format from its magic number, an HTML body's charset."""
