"""A toy plug-in for reme: a counter benchmark, a remember-the-last-answer memory, and a
plain-text tool protocol. Nothing in reme names it; it registers through entry points."""
