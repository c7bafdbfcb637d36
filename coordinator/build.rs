//! `sqlx::migrate!` embeds `migrations/` when the crate is built, but cargo only tracks
//! the files it saw: a new migration must rebuild the crate too.
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
