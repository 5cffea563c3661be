"""First of two distributions that claim the entry-point name dup."""
