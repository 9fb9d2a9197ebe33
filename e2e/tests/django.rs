//! Django through uWSGI in the cluster (the image of e2e/images/django), as a sidecar over
//! a unix socket and as a pool behind a headless Service: the stock LoginView with CSRF
//! and signed-cookie sessions, a POST with the token logged in, one without refused, and
//! /static/ served by skiff from the files in the image.

use serde_json::json;
use skiff_e2e::{wait_condition, wait_http, Release, DJANGO_IMAGE};
use skiff_operator::crd::VirtualServer;
use std::time::Duration;

/// A client that follows no redirect (the test reads them).
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// The `name=value` pairs a response sets, for a `Cookie` header.
fn cookies(r: &reqwest::Response) -> Vec<String> {
    r.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok()?.split(';').next().map(String::from))
        .collect()
}

/// The csrfmiddlewaretoken of the login form.
fn form_token(page: &str) -> String {
    let at = page
        .find("name=\"csrfmiddlewaretoken\" value=\"")
        .unwrap_or_else(|| panic!("no CSRF token in the login page:\n{page:.500}"));
    let rest = &page[at + "name=\"csrfmiddlewaretoken\" value=\"".len()..];
    rest[..rest.find('"').unwrap()].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn django_login_with_csrf_through_a_sidecar_and_a_pool() {
    let Some(cluster) = skiff_e2e::cluster().await else {
        return;
    };
    let ns = cluster.namespace("django").await;
    let _release = Release::install(&cluster, &ns, &["operator.replicas=1"]).await;
    let resources = json!({ "requests": { "cpu": "20m", "memory": "32Mi" } });
    let rules = json!([
        { "name": "static", "match": { "prefix": "/static/" }, "action": { "static": {} } },
        { "name": "django", "match": { "prefix": "/" }, "action": { "uwsgi": { "pool": "django" } } }
    ]);
    let content =
        json!({ "image": { "reference": DJANGO_IMAGE, "path": "/srv/blog/static-root" } });
    // The same site twice, the pool placed beside skiff and on its own.
    let placements = [
        (
            "side",
            json!({ "placement": "sidecar", "socket": "django.sock",
            "args": ["--socket", "/run/skiff/pools/django.sock", "--chmod-socket=666"] }),
        ),
        (
            "pooled",
            json!({ "placement": "pool", "port": 8000, "resources": resources,
            "args": ["--socket", "0.0.0.0:8000"] }),
        ),
    ];
    for (name, placement) in placements {
        let mut pool = json!({ "name": "django", "protocol": "uwsgi", "image": DJANGO_IMAGE });
        pool.as_object_mut()
            .unwrap()
            .extend(placement.as_object().unwrap().clone());
        ns.apply::<VirtualServer>(json!({
            "metadata": { "name": name },
            "spec": {
                "hosts": [format!("{name}.example")], "content": content, "replicas": 1,
                "resources": resources, "rules": rules, "pools": [pool]
            }
        }))
        .await;
    }
    for name in ["side", "pooled"] {
        let vs = wait_condition(&ns, name, "Ready", "True").await;
        let base = format!("http://{}", vs.status.unwrap().address.unwrap());
        let login = format!("{base}/login/");
        wait_http(&login, Duration::from_secs(120), |r| r.status == 200).await;

        // The stylesheet collectstatic put in the image, served by skiff.
        let css = wait_http(
            &format!("{base}/static/blog/site.css"),
            Duration::from_secs(10),
            |r| r.status == 200,
        )
        .await;
        assert_eq!(
            css.headers["server"], "skiff",
            "{name}: /static/ from skiff"
        );

        let client = client();
        let page = client.get(&login).send().await.unwrap();
        assert_eq!(page.status(), 200);
        let csrf_cookie = cookies(&page).join("; ");
        assert!(csrf_cookie.contains("csrftoken="), "{name}: {csrf_cookie}");
        let token = form_token(&page.text().await.unwrap());
        let form = [
            ("csrfmiddlewaretoken", token.as_str()),
            ("username", "demo"),
            ("password", "skiff-demo"),
        ];
        let r = client
            .post(&login)
            .header("Referer", login.as_str())
            .header("Cookie", &csrf_cookie)
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 302, "{name}: login with the token");
        assert_eq!(r.headers()["location"], "/welcome/", "{name}");
        let session = cookies(&r).join("; ");
        assert!(session.contains("sessionid="), "{name}: {session}");
        let welcome = client
            .get(format!("{base}/welcome/"))
            .header("Cookie", &session)
            .send()
            .await
            .unwrap();
        assert_eq!(welcome.status(), 200, "{name}: the session cookie logs in");
        assert!(welcome.text().await.unwrap().contains("demo"), "{name}");

        // The same POST without the CSRF cookie and token is refused.
        let r = client
            .post(&login)
            .form(&[("username", "demo"), ("password", "skiff-demo")])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{name}: a POST without the token");
        eprintln!("{name}: login page, CSRF-checked POST (302, then /welcome/), POST without token 403, /static/ from skiff");
    }
}
