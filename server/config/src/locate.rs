//! Finds the line and column of a value in YAML text by its path (`a.b[2].c`), so
//! semantic errors point into the file the same way syntax errors do.

use granit_parser::{Event, Parser};

enum Frame {
    Map {
        key: Option<String>,
        expecting_key: bool,
    },
    Seq {
        index: usize,
    },
}

fn path_of(stack: &[Frame]) -> String {
    let mut out = String::new();
    for f in stack {
        match f {
            Frame::Map { key: Some(k), .. } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Frame::Map { key: None, .. } => {}
            Frame::Seq { index } => out.push_str(&format!("[{index}]")),
        }
    }
    out
}

/// A value finished: the parent moves on to its next key or element.
fn advance(stack: &mut [Frame]) {
    match stack.last_mut() {
        Some(Frame::Map { key, expecting_key }) => {
            *key = None;
            *expecting_key = true;
        }
        Some(Frame::Seq { index }) => *index += 1,
        None => {}
    }
}

/// 1-based (line, column) of the value at `target`, or of its nearest enclosing value.
pub fn locate(text: &str, target: &str) -> Option<(usize, usize)> {
    let mut stack: Vec<Frame> = Vec::new();
    let mut best: Option<(usize, usize)> = None;
    for item in Parser::new_from_str(text) {
        let (event, span) = item.ok()?;
        let pos = (span.start.line(), span.start.col() + 1);
        match event {
            Event::Scalar(value, ..) => {
                if let Some(Frame::Map {
                    key,
                    expecting_key: expecting @ true,
                }) = stack.last_mut()
                {
                    *key = Some(value.into_owned());
                    *expecting = false;
                    continue;
                }
                let p = path_of(&stack);
                if p == target {
                    return Some(pos);
                }
                if target.starts_with(&p) && !p.is_empty() {
                    best = Some(pos);
                }
                advance(&mut stack);
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let p = path_of(&stack);
                if p == target && !p.is_empty() {
                    return Some(pos);
                }
                if target.starts_with(&p) && !p.is_empty() {
                    best = Some(pos);
                }
                stack.push(if matches!(event, Event::MappingStart(..)) {
                    Frame::Map {
                        key: None,
                        expecting_key: true,
                    }
                } else {
                    Frame::Seq { index: 0 }
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
                advance(&mut stack);
            }
            Event::Alias(..) => advance(&mut stack),
            _ => {}
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::locate;

    const DOC: &str = "listen: 0.0.0.0:80\nvirtual_servers:\n  - name: a\n    rules:\n      - match: { prefix: /x }\n        action:\n          redirect: { to: /$hots }\n";

    #[test]
    fn finds_values_by_path() {
        assert_eq!(locate(DOC, "listen"), Some((1, 9)));
        assert_eq!(locate(DOC, "virtual_servers[0].name"), Some((3, 11)));
        assert_eq!(
            locate(DOC, "virtual_servers[0].rules[0].match.prefix"),
            Some((5, 26))
        );
        assert_eq!(
            locate(DOC, "virtual_servers[0].rules[0].action.redirect.to"),
            Some((7, 27))
        );
    }

    #[test]
    fn falls_back_to_the_nearest_parent() {
        assert_eq!(
            locate(DOC, "virtual_servers[0].rules[0].action.redirect.status"),
            Some((7, 21))
        );
    }
}
