//! Prompts: C3L path resolution, built-in defaults, rendering.
