"""Storage: the only package that imports LanceDB or pyarrow. Import ``storage.store`` for the store."""
