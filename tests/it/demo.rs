//! The bundled demo provider answers every error in the shape its spec documents, including
//! requests axum itself cannot parse.

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

async fn send(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn demo_errors_have_the_provider_shape() {
    let shutdown = CancellationToken::new();
    let address = sdkbox::demo::start(shutdown.clone()).await.unwrap();
    let client = reqwest::Client::new();
    let url = |path: &str| format!("http://{address}{path}");
    let key = format!("Bearer {}", sdkbox::demo::DEMO_KEY);

    let (status, body) = send(
        client
            .post(url("/v1/customers"))
            .header("authorization", &key)
            .header("content-type", "application/json")
            .body("{\"email\": "),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("JSON"),
        "{body}"
    );

    let (status, body) = send(
        client
            .post(url("/v1/customers"))
            .header("authorization", &key)
            .header("content-type", "text/plain")
            .body("email=a@b.c"),
    )
    .await;
    assert_eq!(status, 415);
    assert_eq!(body["error"]["type"], "invalid_request_error");

    let (status, body) = send(
        client
            .get(url("/v1/customers"))
            .header("authorization", "Bearer nope"),
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["type"], "authentication_error");

    let (status, body) = send(
        client
            .get(url("/v1/customers?limit=abc"))
            .header("authorization", &key),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "limit");

    for (path, param) in [
        ("/v1/orders?status=lost", "status"),
        ("/v1/products?active=yes", "active"),
    ] {
        let (status, body) = send(client.get(url(path)).header("authorization", &key)).await;
        assert_eq!(
            (status, &body["error"]["param"]),
            (400, &json!(param)),
            "{body}"
        );
    }
    let (status, body) = send(
        client
            .post(url("/v1/customers/cus_001"))
            .header("authorization", &key)
            .json(&json!({"email": "not an address"})),
    )
    .await;
    assert_eq!(
        (status, &body["error"]["param"]),
        (400, &json!("email")),
        "{body}"
    );
    shutdown.cancel();
}
