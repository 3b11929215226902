"""Built-in collective algorithms; importing this package registers them all."""
