"""Files: metrics records checked against their schema (shipped in this package), atomic
writes, and the tables collected from records."""
