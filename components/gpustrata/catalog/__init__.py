"""Data catalogues (GPU models, cloud instance types, ...), each entry with its source."""
