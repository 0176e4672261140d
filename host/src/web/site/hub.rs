//! The hub page (`/`): one search box over this node's agents and the
//! network's, with filters. The page comes with what the node knows at
//! once; `/hub/search` then streams what the network's answers add, one
//! card at a time, as newline-delimited JSON.

use super::session::Access;
use super::views::{AgentView, Show};
use super::{Site, failure};
use axum::Extension;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use minijinja::value::Serde;
use serde::Deserialize;
use serde_json::json;
use std::collections::HashSet;
use std::sync::Arc;

/// Cards on one page of the hub.
const PAGE_SIZE: usize = 60;
/// Cards a search shows at most; past that, the page asks for more words.
const SEARCH_LIMIT: usize = 100;
/// The longest search accepted, in bytes.
const MAX_QUERY: usize = 300;

#[derive(Debug, Default, Deserialize)]
pub struct HubQuery {
    #[serde(default)]
    q: String,
    #[serde(default)]
    show: Show,
    /// From 1.
    #[serde(default)]
    page: Option<usize>,
}

fn words(query: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    crate::store::terms::terms(query)
        .filter(|w| seen.insert(w.clone()))
        .collect()
}

/// `GET /`
pub async fn page(
    State(site): State<Arc<Site>>,
    Extension(access): Extension<Access>,
    query: Result<Query<HubQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(query)) = query else {
        return site.error_page(
            Some(access),
            StatusCode::BAD_REQUEST,
            "the search cannot be read: use the search box",
        );
    };
    if query.q.len() > MAX_QUERY {
        return site.error_page(
            Some(access),
            StatusCode::BAD_REQUEST,
            &format!(
                "a search may be at most {MAX_QUERY} bytes long; this one is {}",
                query.q.len()
            ),
        );
    }
    let searching = !words(&query.q).is_empty();
    let (agents, total) = if searching {
        site.matches_now(&query.q, query.show)
    } else {
        let all: Vec<AgentView> = site
            .all_agents()
            .into_iter()
            .filter(|a| query.show.admits(a))
            .collect();
        let total = all.len();
        (all, total)
    };
    let pages = total.div_ceil(PAGE_SIZE).max(1);
    let page = query.page.unwrap_or(1).clamp(1, pages);
    let shown: Vec<&AgentView> = if searching {
        agents.iter().collect()
    } else {
        agents
            .iter()
            .skip((page - 1) * PAGE_SIZE)
            .take(PAGE_SIZE)
            .collect()
    };
    let frame = site.frame(access, "hub");
    site.pages.render(
        StatusCode::OK,
        "hub.html",
        minijinja::context! {
            q => query.q,
            show => Serde(query.show),
            agents => Serde(shown),
            total,
            page,
            pages,
            searching,
            search_limit => SEARCH_LIMIT,
            ..frame,
        },
    )
}

impl Site {
    /// What a search finds without waiting for the network: installed
    /// agents first, then the index's, at most [`SEARCH_LIMIT`], with how
    /// many match in all.
    fn matches_now(&self, query: &str, show: Show) -> (Vec<AgentView>, usize) {
        let mut agents = self.installed_matching(&words(query));
        let trust = self.trust();
        let installed: HashSet<String> = agents.iter().map(|a| a.id.clone()).collect();
        let mut total = agents.len();
        if let Some(hub) = &self.hub {
            let (found, in_index) = hub.search_index(query, SEARCH_LIMIT);
            total += in_index
                - found
                    .iter()
                    .filter(|f| installed.contains(&f.id.to_string()))
                    .count();
            agents.extend(
                found
                    .iter()
                    .filter(|f| !installed.contains(&f.id.to_string()))
                    .map(|f| self.found_view(f, &trust)),
            );
        }
        agents.retain(|a| show.admits(a));
        agents.truncate(SEARCH_LIMIT);
        let total = total.max(agents.len());
        (agents, total)
    }
}

/// `GET /hub/search?q=&show=`: one JSON object per line: `{"id", "card"}`
/// for each agent found (its card's HTML), `{"total"}` as the count grows,
/// and `{"done": true}` last (with a `note` when the network was not asked).
pub async fn search(
    State(site): State<Arc<Site>>,
    query: Result<Query<HubQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(query)) = query else {
        return failure(
            StatusCode::BAD_REQUEST,
            "the search cannot be read: q=WORDS&show=all|installed|network|trusted",
        );
    };
    if query.q.len() > MAX_QUERY {
        return failure(
            StatusCode::BAD_REQUEST,
            format!("a search may be at most {MAX_QUERY} bytes long"),
        );
    }
    let (lines, body) = tokio::sync::mpsc::unbounded_channel::<serde_json::Value>();
    tokio::spawn(async move {
        let sent = std::sync::Mutex::new(HashSet::<String>::new());
        let send_cards = |agents: Vec<AgentView>, total: usize| {
            let mut sent = sent
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for agent in agents.into_iter().filter(|a| query.show.admits(a)) {
                if sent.len() >= SEARCH_LIMIT || !sent.insert(agent.id.clone()) {
                    continue;
                }
                match site.pages.card(minijinja::Value::from(Serde(&agent))) {
                    Ok(card) => {
                        let _ = lines.send(json!({ "id": agent.id, "card": card }));
                    }
                    Err(e) => tracing::error!("a card cannot be rendered: {e:#}"),
                }
            }
            let _ = lines.send(json!({ "total": total.max(sent.len()) }));
        };
        let installed = site.installed_matching(&words(&query.q));
        let installed_ids: HashSet<String> = installed.iter().map(|a| a.id.clone()).collect();
        let installed_count = installed.len();
        send_cards(installed, installed_count);
        let Some(hub) = site.hub.clone() else {
            let _ = lines.send(json!({ "done": true, "note": "this node is not on the network: only its own agents were searched" }));
            return;
        };
        let trust = site.trust();
        let on_found = |found: Vec<crate::hub::Found>, in_index: usize| {
            let overlap = found
                .iter()
                .filter(|f| installed_ids.contains(&f.id.to_string()))
                .count();
            let views = found
                .iter()
                .filter(|f| !installed_ids.contains(&f.id.to_string()))
                .map(|f| site.found_view(f, &trust))
                .collect();
            send_cards(views, installed_count + in_index - overlap);
        };
        hub.search_live(&query.q, SEARCH_LIMIT, &on_found).await;
        let _ = lines.send(json!({ "done": true }));
    });
    crate::http::streams::ndjson_stream(body)
}
