//! serde helpers shared by the model's files: defaults and "skip when default" tests.

pub(super) fn default_true() -> bool {
    true
}

pub(super) fn is_true(b: &bool) -> bool {
    *b
}

pub(super) fn is_false(b: &bool) -> bool {
    !*b
}

pub(super) fn is_zero(n: &usize) -> bool {
    *n == 0
}
