//! Human navigation (a profile's `[navigation] mode = "human"`): reach the result page the
//! way a person does — open the mall's home page, dwell, click the search box, type the
//! query key by key with human delays, press Enter — instead of opening the search URL.
//!
//! Every input is a trusted CDP input event (`Input.dispatchMouseEvent`,
//! `Input.dispatchKeyEvent`), so the page sees `keydown`/`keyup`/`input` events like a
//! person's: latin letters and digits as their keys, Hangul as IME input (`Process`, key
//! code 229, committing the syllable). The result page is then read as any other
//! ([`read_loaded_page`](super::page::read_loaded_page)); next pages still open by URL.

use std::time::Duration;

use lps_proto::{model, pb};
use serde_json::{Value, json};
use tokio::time::Instant;
use tracing::{debug, instrument};

use super::{Browser, BrowserError, instance::PAGE_LOAD_TIMEOUT};

/// How long the home page may take to show its search box.
const INPUT_TIMEOUT: Duration = Duration::from_secs(15);

/// Opens the home page, types `query` into its search box and submits it with Enter;
/// returns once the browser left the home page (the result page is loading or loaded).
///
/// # Errors
/// [`BrowserError::WebDriver`] when the search box never shows or the page does not move
/// on; the browser's own errors otherwise.
#[instrument(name = "browser.human_search", skip_all, fields(home = %nav.home_url), err(level = "warn"))]
pub async fn search_like_a_person(
    browser: &Browser,
    nav: &pb::Navigation,
    query: &str,
) -> Result<(), BrowserError> {
    browser.goto(&nav.home_url).await?;
    let home = current_url(browser).await?;
    let (x, y) = wait_for_input(browser, &nav.search_input_selector).await?;
    sleep_between(nav.dwell_min, nav.dwell_max).await;
    browser.click_at(x, y).await?;
    for ch in query.chars() {
        sleep_between(nav.key_delay_min, nav.key_delay_max).await;
        type_char(browser, ch).await?;
    }
    sleep_between(nav.key_delay_min, nav.key_delay_max).await;
    press_enter(browser).await?;
    // The form submits: wait until the document is another one.
    let deadline = Instant::now() + PAGE_LOAD_TIMEOUT;
    loop {
        match current_url(browser).await {
            Ok(url) if url != home => {
                debug!(%url, "left the home page");
                return Ok(());
            }
            // NB: mid-navigation a script can fail; the next look sees the new page.
            Ok(_) | Err(BrowserError::WebDriver(_)) => {}
            Err(err) => return Err(err),
        }
        if Instant::now() >= deadline {
            return Err(BrowserError::WebDriver(format!(
                "the search box on {} did not lead to a result page within {PAGE_LOAD_TIMEOUT:?}",
                nav.home_url
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn current_url(browser: &Browser) -> Result<String, BrowserError> {
    let v = browser.script("return location.href;", Vec::new()).await?;
    Ok(v.as_str().unwrap_or_default().to_owned())
}

/// The viewport centre of the search box, once it is shown (scrolled into view first).
async fn wait_for_input(browser: &Browser, selector: &str) -> Result<(f64, f64), BrowserError> {
    const FIND: &str = "var el = document.querySelector(arguments[0]); if (!el) { return null; } \
        el.scrollIntoView({ block: 'center' }); var r = el.getBoundingClientRect(); \
        if (r.width < 1 || r.height < 1) { return null; } \
        return [r.left + r.width / 2, r.top + r.height / 2];";
    let deadline = Instant::now() + INPUT_TIMEOUT;
    loop {
        match browser
            .script(FIND, vec![Value::String(selector.to_owned())])
            .await
        {
            Ok(Value::Array(point)) => {
                let at = |i: usize| point.get(i).and_then(Value::as_f64).unwrap_or(0.0);
                return Ok((at(0), at(1)));
            }
            Ok(_) | Err(BrowserError::WebDriver(_)) => {}
            Err(err) => return Err(err),
        }
        if Instant::now() >= deadline {
            return Err(BrowserError::WebDriver(format!(
                "no search box {selector:?} on the home page within {INPUT_TIMEOUT:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One key press: a latin letter, digit or sign as its key; anything else (Hangul) as a
/// committed IME composition.
async fn type_char(browser: &Browser, ch: char) -> Result<(), BrowserError> {
    let text = ch.to_string();
    let (down, up) = if ch.is_ascii_graphic() || ch == ' ' {
        let code = key_code(ch);
        let key = json!({
            "key": text, "text": text, "unmodifiedText": text,
            "windowsVirtualKeyCode": code, "nativeVirtualKeyCode": code,
        });
        (key.clone(), key)
    } else {
        let key = json!({
            "key": "Process", "code": "", "text": text, "unmodifiedText": text,
            "windowsVirtualKeyCode": 229, "nativeVirtualKeyCode": 229,
        });
        (key.clone(), key)
    };
    key_event(browser, "keyDown", down).await?;
    key_event(browser, "keyUp", strip_text(up)).await
}

async fn press_enter(browser: &Browser) -> Result<(), BrowserError> {
    let key = json!({
        "key": "Enter", "code": "Enter", "text": "\r", "unmodifiedText": "\r",
        "windowsVirtualKeyCode": 13, "nativeVirtualKeyCode": 13,
    });
    key_event(browser, "keyDown", key.clone()).await?;
    key_event(browser, "keyUp", strip_text(key)).await
}

async fn key_event(browser: &Browser, kind: &str, mut params: Value) -> Result<(), BrowserError> {
    if let Some(map) = params.as_object_mut() {
        map.insert("type".to_owned(), Value::String(kind.to_owned()));
    }
    browser
        .cdp("Input.dispatchKeyEvent", params)
        .await
        .map(drop)
}

/// A key-up carries no text (it would type the character twice).
fn strip_text(mut key: Value) -> Value {
    if let Some(map) = key.as_object_mut() {
        map.remove("text");
        map.remove("unmodifiedText");
    }
    key
}

/// The Windows virtual key code of a latin letter, digit or space (what pages read as
/// `keyCode`); 0 for other signs.
fn key_code(ch: char) -> u32 {
    match ch {
        'a'..='z' => u32::from(ch.to_ascii_uppercase()),
        'A'..='Z' | '0'..='9' | ' ' => u32::from(ch),
        _ => 0,
    }
}

/// Sleeps a random time in `[min, max]`.
async fn sleep_between(min: Option<prost_types::Duration>, max: Option<prost_types::Duration>) {
    let to = |d: Option<prost_types::Duration>| {
        d.and_then(|d| model::duration_from_pb("navigation", d).ok())
            .unwrap_or(Duration::ZERO)
    };
    let (lo, hi) = (to(min), to(max));
    let span = hi.saturating_sub(lo);
    tokio::time::sleep(lo + span.mul_f64(fastrand::f64())).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_codes_and_key_ups() {
        assert_eq!(key_code('a'), 65);
        assert_eq!(key_code('Z'), 90);
        assert_eq!(key_code('7'), 55);
        assert_eq!(key_code('-'), 0);
        let up = strip_text(json!({ "key": "a", "text": "a", "unmodifiedText": "a" }));
        assert_eq!(up, json!({ "key": "a" }));
    }
}
