//! Closed sets of names stored as text: each enum lists its values once,
//! with the name it is stored under, and reading an unknown name is an
//! error that says which column held what, never a silent default.

/// An enum stored as one of a fixed set of names.
pub trait Named: Sized + Copy + 'static {
    /// Every value, in order.
    const ALL: &'static [Self];

    /// The stored name.
    fn as_str(self) -> &'static str;

    /// The value stored as `name`, if it is one.
    fn parse(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.as_str() == name)
    }

    /// The value in `column` read as `name`; an unknown name is an error
    /// naming both.
    fn read(column: &'static str, name: &str) -> Result<Self, UnknownValue> {
        Self::parse(name).ok_or_else(|| UnknownValue {
            column,
            value: name.to_owned(),
        })
    }
}

/// A stored value that is not one closer knows: a newer version wrote it,
/// or someone edited the row by hand.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown value {value:?} in column {column}")]
pub struct UnknownValue {
    pub column: &'static str,
    pub value: String,
}
