"""Rules of category layout (filled in as that part of wireup lands)."""
