//! A fake LLM.
