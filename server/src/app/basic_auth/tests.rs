//! htpasswd parsing and basic-auth decisions, without a server.

use super::*;
use crate::http::request::HeaderSource;

fn auth(entries: &[(&str, &str, u32)]) -> BasicAuth {
    let text: String = entries
        .iter()
        .map(|(u, p, cost)| format!("{u}:{}\n", bcrypt::hash(p, *cost).unwrap()))
        .collect();
    BasicAuth::from_htpasswd(&text, "r").unwrap()
}

fn basic(user_password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(user_password)
    )
}

fn decide(auth: &BasicAuth, authorization: Option<&str>, verdict: Option<&Verdict>) -> Decision {
    let headers: Vec<httparse::Header<'_>> = authorization
        .iter()
        .map(|v| httparse::Header {
            name: "Authorization",
            value: v.as_bytes(),
        })
        .collect();
    let req = RequestHead {
        headers: HeaderSource::H1(&headers),
        ..Default::default()
    };
    auth.decide(&req, verdict)
}

fn verification(d: Decision) -> Verification {
    match d {
        Decision::Verify(v) => v,
        Decision::Permit => panic!("permitted without a verification"),
        Decision::Deny => panic!("denied without a verification"),
        Decision::Busy => panic!("busy without a verification"),
    }
}

#[test]
fn htpasswd_accepts_only_well_formed_bcrypt() {
    let err = |text: &str| BasicAuth::from_htpasswd(text, "r").err().expect("refused");
    assert!(err("bob:{SHA}abc\n").contains("not bcrypt"));
    assert!(err("bob:plain\n").contains("line 1"));
    assert!(err("bob:$2b$04$tooshort\n").contains("malformed"));
    let good = bcrypt::hash("pw", 4).unwrap();
    assert!(err(&format!("bob:{}", good.replacen("$04$", "$99$", 1))).contains("malformed"));
    assert!(BasicAuth::from_htpasswd(&format!("bob:{good}\n"), "r").is_ok());
    // Well formed, but each check (and each guess at an unknown user) would take
    // seconds: the hash is rewritten with cost 15 without hashing at that cost.
    let costly = format!("# admins\nbob:{}\n", good.replacen("$04$", "$15$", 1));
    assert_eq!(
        err(&costly),
        "line 2: the bcrypt cost of \"bob\" is 15, above 14: each check would hold a CPU for seconds; create it with `htpasswd -B -C 12`"
    );
}

/// A user on two lines is left out whole, whichever line is valid: a password appended
/// to change it would otherwise be ignored (or, after an upgrade, an old one revived).
#[test]
fn a_user_on_two_lines_is_left_out_whole() {
    let first = bcrypt::hash("first", 4).unwrap();
    let second = bcrypt::hash("second", 4).unwrap();
    let text =
        format!("alice:{first}\nbob:{first}\nalice:{second}\ncarol:{{SHA}}x\ncarol:{first}\n");
    assert_eq!(
        BasicAuth::from_htpasswd(&text, "r")
            .err()
            .expect("refused at start"),
        "line 1: \"alice\" is on lines 1, 3: none is used until one is left"
    );
    let (a, refused) = BasicAuth::from_htpasswd_skipping(&text, "r").unwrap();
    assert_eq!((a.left_out, refused.len()), (4, 4), "{refused:?}");
    let check = |pair: &str| verification(decide(&a, Some(&basic(pair)), None)).check();
    for pair in ["alice:first", "alice:second", "carol:first"] {
        assert_eq!(check(pair), Checked::UnknownUser, "{pair}");
    }
    assert_eq!(check("bob:first"), Checked::Success);
}

#[test]
fn missing_or_garbled_credentials_are_denied_without_bcrypt() {
    let a = auth(&[("alice", "s3cret", 4)]);
    for value in [
        None,
        Some("Bearer abc"),
        Some("Basic !!!not-base64"),
        Some(basic("no-colon").as_str()),
    ] {
        assert!(
            matches!(decide(&a, value, None), Decision::Deny),
            "{value:?}"
        );
    }
}

#[test]
fn a_file_without_users_denies_everyone_without_bcrypt() {
    // An emptied file revokes everyone, as nginx reads it, rather than failing the
    // reload and leaving the old users in.
    let empty = BasicAuth::from_htpasswd("# nobody\n\n", "r").unwrap();
    assert!(empty.denies_all());
    assert!(matches!(
        decide(&empty, Some(&basic("alice:s3cret")), None),
        Decision::Deny
    ));
    assert!(!auth(&[("alice", "s3cret", 4)]).denies_all());
}

#[test]
fn known_and_unknown_users_both_need_a_bcrypt_of_the_same_cost() {
    let a = auth(&[("alice", "s3cret", 4), ("bob", "pw", 5)]);
    let known = verification(decide(&a, Some(&basic("alice:wrong")), None));
    assert!(known.known);
    assert_eq!(&*known.hash, &**a.users.get("alice").unwrap());
    let unknown = verification(decide(&a, Some(&basic("mallory:s3cret")), None));
    assert!(!unknown.known);
    // The dummy is bcrypt's to hash (not refused at once) at the highest entry cost.
    assert_eq!(bcrypt_cost(&unknown.hash), Some(5));
    assert!(matches!(bcrypt::verify("s3cret", &unknown.hash), Ok(false)));
    assert_eq!(unknown.check(), Checked::UnknownUser);
    assert_eq!(known.check(), Checked::WrongPassword);
}

#[test]
fn a_success_is_remembered_and_a_failure_is_not() {
    let a = auth(&[("alice", "s3cret", 4)]);
    let right = basic("alice:s3cret");
    let v = verification(decide(&a, Some(&right), None));
    assert_eq!(v.check(), Checked::Success);
    assert!(matches!(decide(&a, Some(&right), None), Decision::Permit));
    let wrong = basic("alice:wrong");
    let v = verification(decide(&a, Some(&wrong), None));
    assert_eq!(v.check(), Checked::WrongPassword);
    verification(decide(&a, Some(&wrong), None));
    // The cache holds keyed digests, not the values.
    assert_eq!(a.verified.len(), 1);
}

#[test]
fn a_verdict_answers_its_own_credentials_only() {
    let a = auth(&[("alice", "s3cret", 4)]);
    let wrong = basic("alice:wrong");
    let v = verification(decide(&a, Some(&wrong), None));
    let verdict = Verdict {
        key: v.key,
        outcome: Outcome::Deny,
    };
    assert!(matches!(
        decide(&a, Some(&wrong), Some(&verdict)),
        Decision::Deny
    ));
    // Other credentials (or another rule's digest key) ignore it.
    verification(decide(&a, Some(&basic("alice:other")), Some(&verdict)));
    let pass = Verdict {
        key: v.key,
        outcome: Outcome::Permit,
    };
    assert!(matches!(
        decide(&a, Some(&wrong), Some(&pass)),
        Decision::Permit
    ));
    // Not checked for want of room: busy, not a wrong password.
    let busy = Verdict {
        key: v.key,
        outcome: Outcome::Busy,
    };
    assert!(matches!(
        decide(&a, Some(&wrong), Some(&busy)),
        Decision::Busy
    ));
    // A verdict is for one request: it does not fill the cache.
    verification(decide(&a, Some(&wrong), None));
}

#[tokio::test]
async fn run_counts_by_result_and_returns_the_verdict() {
    let metrics = Metrics::new();
    let a = auth(&[("alice", "s3cret", 4)]);
    let count = |result| {
        metrics
            .auth_verifications
            .get_or_create(&ResultLabels { result })
            .get()
    };
    let right = verification(decide(&a, Some(&basic("alice:s3cret")), None));
    assert_eq!(right.run(&metrics).await.outcome, Outcome::Permit);
    let wrong = verification(decide(&a, Some(&basic("alice:nope")), None));
    assert_eq!(wrong.run(&metrics).await.outcome, Outcome::Deny);
    let unknown = verification(decide(&a, Some(&basic("eve:s3cret")), None));
    assert_eq!(unknown.run(&metrics).await.outcome, Outcome::Deny);
    assert_eq!(
        (
            count("success"),
            count("wrong_password"),
            count("unknown_user")
        ),
        (1, 1, 1)
    );
    assert_eq!(metrics.auth_verifications_pending.get(), 0);
}
