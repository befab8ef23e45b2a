//! Helpers shared by the integration tests.

#![allow(dead_code)]

pub mod db;
pub mod git;
