"""Config groups this plug-in adds to reme's search path (entry point group reme.configs)."""
