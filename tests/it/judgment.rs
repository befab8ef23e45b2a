//! The judgment core through real HTTP.
