"""The recall pipeline's stages, one module each, in the order ``retrieval.pipeline`` lists them."""
