//! The LLM query trait and its backends (OpenAI-compatible, Anthropic).
