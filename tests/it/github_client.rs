async fn _placeholder() {}
