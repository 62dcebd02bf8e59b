"""Pure: from files to pieces. Extraction (in a bounded child process), chunking, each paragraph's
context, the embedding windows, and stitching hits into answer paragraphs. No models, no settings."""
