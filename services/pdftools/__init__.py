"""The PDF steps: a library beside `services/core` (it imports core, never a service;
the renderer's finishing and PDF-tool jobs import it)."""
