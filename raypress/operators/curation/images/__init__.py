"""Images in rows: reading image headers (size, format, hash), and the base of Data-Juicer's image-list filters."""
