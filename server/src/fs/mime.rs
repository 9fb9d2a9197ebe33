//! Content-Type from the file name, over mime_guess's full table, with `charset=utf-8`
//! for text types so browsers do not sniff.

use http::HeaderValue;

pub fn content_type_for(path: &str) -> HeaderValue {
    let name = path.rsplit('/').next().unwrap_or(path);
    let Some(mime) = mime_guess::from_path(name).first() else {
        return HeaderValue::from_static("application/octet-stream");
    };
    let essence = mime.essence_str();
    let textual = mime.type_() == mime_guess::mime::TEXT
        || matches!(
            essence,
            "application/javascript"
                | "application/json"
                | "application/xml"
                | "application/manifest+json"
                | "image/svg+xml"
                | "application/ld+json"
                | "application/xhtml+xml"
        );
    let value = if textual {
        format!("{essence}; charset=utf-8")
    } else {
        essence.to_owned()
    };
    HeaderValue::from_str(&value)
        .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_types() {
        assert_eq!(content_type_for("a/index.html"), "text/html; charset=utf-8");
        assert_eq!(content_type_for("site.css"), "text/css; charset=utf-8");
        assert_eq!(content_type_for("app.js"), "text/javascript; charset=utf-8");
        assert_eq!(
            content_type_for("data.json"),
            "application/json; charset=utf-8"
        );
        assert_eq!(content_type_for("logo.svg"), "image/svg+xml; charset=utf-8");
        assert_eq!(content_type_for("photo.JPG"), "image/jpeg");
        assert_eq!(content_type_for("font.woff2"), "font/woff2");
        assert_eq!(content_type_for("app.wasm"), "application/wasm");
        assert_eq!(content_type_for("README"), "application/octet-stream");
        assert_eq!(content_type_for("x.unknownext"), "application/octet-stream");
    }
}
