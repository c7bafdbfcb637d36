//! OpsService adapter: the ops snapshot, nodes and proxy ports for client (or admin)
//! tokens; RetryDead, DrainNode and ClearNegativeCache for admin tokens only
//! (PERMISSION_DENIED for a client token). Figures come from [`Searches`]; the drain message from [`control`].

use std::{sync::Arc, time::Duration};

use lps_proto::{
    model::{FieldError, JobState, MallId, duration_to_pb, timestamp_from_pb, timestamp_to_pb},
    pb::{self, ops_service_server::OpsServiceServer},
};
use tonic::{Request, Response, Status};
use tracing::info;

use super::{
    invalid,
    limits::{ClientLimits, LimitState},
    paging,
    search::history_product,
    status,
};
use crate::{
    auth::{Role, Tokens},
    control,
    delivery::{DeliveryFilter, Outbox},
    fleet::{Fleet, NodeInfo, PortState, ProxyPortInfo},
    ops::{ClientOps, Ops, OpsSnapshot},
    queue::Queue,
    search::{RetryDeadFilter, Searches},
};

/// The OpsService implementation.
#[derive(Debug, Clone)]
pub struct OpsApi {
    queue: Queue,
    searches: Searches,
    fleet: Fleet,
    ops: Ops,
    outbox: Outbox,
    tokens: Arc<Tokens>,
    ledger: Option<crate::ledger::Ledger>,
    /// SearchService's limits, whose state GetOps shows per client.
    limits: ClientLimits,
}

impl OpsApi {
    pub fn new(queue: Queue, tokens: Arc<Tokens>) -> Self {
        Self {
            ledger: None,
            limits: ClientLimits::default(),
            outbox: Outbox::new(queue.pool().clone()),
            fleet: Fleet::new(queue.pool().clone()),
            ops: Ops::new(queue.clone()),
            searches: Searches::new(queue.clone()),
            queue,
            tokens,
        }
    }

    /// Serves `AdviseBudget` from this ledger.
    #[must_use]
    pub fn with_ledger(mut self, ledger: Option<crate::ledger::Ledger>) -> Self {
        self.ledger = ledger;
        self
    }

    /// Shows where each client stands against these limits (SearchService's own).
    #[must_use]
    pub fn with_limits(mut self, limits: ClientLimits) -> Self {
        self.limits = limits;
        self
    }

    pub fn into_service(self) -> OpsServiceServer<Self> {
        OpsServiceServer::new(self)
    }
}

#[tonic::async_trait]
impl pb::ops_service_server::OpsService for OpsApi {
    async fn get_ops(
        &self,
        request: Request<pb::GetOpsRequest>,
    ) -> Result<Response<pb::OpsSnapshot>, Status> {
        let caller = self.tokens.caller(request.metadata())?;
        let snapshot = self.ops.snapshot().await.map_err(status)?;
        let mut pb = ops_to_pb(&snapshot);
        for c in &mut pb.clients {
            c.limits = Some(limits_to_pb(&self.limits.state(&c.client)));
        }
        // A client sees its own figures alone: nothing of the deployment or other clients.
        if let Some(own) = caller.scope() {
            let mut mine = pb
                .clients
                .into_iter()
                .find(|c| c.client == own)
                .unwrap_or_else(|| client_ops_to_pb(&ClientOps::idle(own)));
            mine.limits = Some(limits_to_pb(&self.limits.state(own)));
            pb = pb::OpsSnapshot {
                at: pb.at,
                clients: vec![mine],
                scope_client: own.to_owned(),
                ..Default::default()
            };
        }
        Ok(Response::new(pb))
    }

    async fn list_nodes(
        &self,
        request: Request<pb::ListNodesRequest>,
    ) -> Result<Response<pb::ListNodesResponse>, Status> {
        self.tokens.check(request.metadata(), Role::Client)?;
        let req = request.into_inner();
        let after = paging::decode(&req.page_token, "nodes", "").map_err(invalid)?;
        let mut nodes = self.fleet.nodes().await.map_err(status)?;
        nodes.sort_by(|a, b| a.node_id.cmp(&b.node_id));
        let (page, next_page_token) = page_of(
            &nodes,
            |n| n.node_id.clone(),
            after.as_deref(),
            req.page_size,
            "nodes",
        );
        Ok(Response::new(pb::ListNodesResponse {
            nodes: page.iter().map(node_to_pb).collect(),
            next_page_token,
        }))
    }

    async fn advise_budget(
        &self,
        request: Request<pb::AdviseBudgetRequest>,
    ) -> Result<Response<pb::BudgetAdvice>, Status> {
        self.tokens.check(request.metadata(), Role::Client)?;
        let mall =
            lps_proto::model::MallId::new(request.into_inner().mall).map_err(super::invalid)?;
        let Some(ledger) = &self.ledger else {
            return Err(Status::failed_precondition(
                "no proxy gateway is configured (LPS_PROXY_GATEWAY_HOST)",
            ));
        };
        let a = ledger.advise(&mall).await.map_err(super::status)?;
        Ok(Response::new(pb::BudgetAdvice {
            mall: a.mall.to_string(),
            current_budget: a.current_budget,
            sessions: i64::try_from(a.sessions).unwrap_or(i64::MAX),
            blocked_sessions: i64::try_from(a.blocked_sessions).unwrap_or(i64::MAX),
            suggested_budget: a.suggested_budget,
            steps: a
                .steps
                .iter()
                .map(|s| pb::BudgetStep {
                    request_no: s.request_no,
                    reached: i64::try_from(s.reached).unwrap_or(i64::MAX),
                    blocked_at: i64::try_from(s.blocked_at).unwrap_or(i64::MAX),
                    block_rate: s.block_rate,
                    cumulative_block_share: s.cumulative_block_share,
                })
                .collect(),
            threshold: a.params.threshold,
            min_sessions: a.params.min_sessions,
        }))
    }

    async fn list_proxy_ports(
        &self,
        request: Request<pb::ListProxyPortsRequest>,
    ) -> Result<Response<pb::ListProxyPortsResponse>, Status> {
        self.tokens.check(request.metadata(), Role::Client)?;
        let req = request.into_inner();
        let after = paging::decode(&req.page_token, "proxy_ports", "").map_err(invalid)?;
        let mut ports = self.fleet.proxy_ports().await.map_err(status)?;
        // NB: the position is the host and the zero-padded port, so it sorts like the list.
        let key = |p: &ProxyPortInfo| format!("{}|{:05}", p.host, p.port);
        ports.sort_by_key(key);
        let (page, next_page_token) =
            page_of(&ports, key, after.as_deref(), req.page_size, "proxy_ports");
        Ok(Response::new(pb::ListProxyPortsResponse {
            ports: page.iter().map(port_to_pb).collect(),
            next_page_token,
        }))
    }

    async fn retry_dead(
        &self,
        request: Request<pb::RetryDeadRequest>,
    ) -> Result<Response<pb::RetryDeadResponse>, Status> {
        self.tokens.check(request.metadata(), Role::Admin)?;
        let req = request.into_inner();
        let filter = RetryDeadFilter {
            job_ids: req.job_ids,
            mall: match req.mall.trim() {
                "" => None,
                m => Some(MallId::new(m).map_err(invalid)?),
            },
            since: req
                .since
                .map(|t| timestamp_from_pb("since", t))
                .transpose()
                .map_err(invalid)?,
        };
        let requeued = self.searches.retry_dead(&filter).await.map_err(status)?;
        info!(
            requeued = requeued.len(),
            mall = filter.mall.as_ref().map_or("", MallId::as_str),
            "dead jobs requeued"
        );
        Ok(Response::new(pb::RetryDeadResponse {
            requeued: u32::try_from(requeued.len()).unwrap_or(u32::MAX),
        }))
    }

    async fn clear_negative_cache(
        &self,
        request: Request<pb::ClearNegativeCacheRequest>,
    ) -> Result<Response<pb::ClearNegativeCacheResponse>, Status> {
        self.tokens.check(request.metadata(), Role::Admin)?;
        let req = request.into_inner();
        let product = history_product(req.product).map_err(invalid)?;
        let malls = req
            .malls
            .into_iter()
            .enumerate()
            .map(|(i, m)| {
                MallId::new(m.trim()).map_err(|e| FieldError::new(format!("malls[{i}]"), e.reason))
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(invalid)?;
        let cleared = self
            .queue
            .clear_negative_cache(&product, &malls)
            .await
            .map_err(status)?;
        info!(
            product = %product.identity(),
            malls = malls.len(),
            cleared,
            "negative cache cleared"
        );
        Ok(Response::new(pb::ClearNegativeCacheResponse {
            cleared: u32::try_from(cleared).unwrap_or(u32::MAX),
        }))
    }

    async fn list_deliveries(
        &self,
        request: Request<pb::ListDeliveriesRequest>,
    ) -> Result<Response<pb::ListDeliveriesResponse>, Status> {
        self.tokens.check(request.metadata(), Role::Admin)?;
        let req = request.into_inner();
        if req.search_id < 0 {
            return Err(invalid(FieldError::new(
                "search_id",
                "must not be negative",
            )));
        }
        let filter = DeliveryFilter {
            dead_only: req.dead_only,
            search_id: Some(req.search_id).filter(|id| *id > 0),
        };
        let bound = format!("{}|{}", filter.dead_only, req.search_id);
        let before = paging::decode_id(&req.page_token, "deliveries", &bound).map_err(invalid)?;
        let limit = paging::page_size(req.page_size, DEFAULT_FLEET_PAGE, MAX_FLEET_PAGE);
        let page = self
            .outbox
            .list(&filter, before, limit)
            .await
            .map_err(status)?;
        let next_page_token = match page.items.last() {
            Some(last) if page.more => {
                paging::encode("deliveries", &bound, &last.delivery_id.to_string())
            }
            _ => String::new(),
        };
        Ok(Response::new(pb::ListDeliveriesResponse {
            deliveries: page.items.iter().map(pb::Delivery::from).collect(),
            next_page_token,
        }))
    }

    async fn retry_delivery(
        &self,
        request: Request<pb::RetryDeliveryRequest>,
    ) -> Result<Response<pb::Delivery>, Status> {
        self.tokens.check(request.metadata(), Role::Admin)?;
        let id = request.into_inner().delivery_id;
        if id <= 0 {
            return Err(invalid(FieldError::new("delivery_id", "must be positive")));
        }
        let delivery = self.outbox.retry_if_dead(id).await.map_err(status)?;
        info!(
            delivery.id = id,
            search.id = delivery.search_id,
            destination = %delivery.destination,
            "dead delivery retried"
        );
        Ok(Response::new(pb::Delivery::from(&delivery)))
    }

    async fn drain_node(
        &self,
        request: Request<pb::DrainNodeRequest>,
    ) -> Result<Response<pb::DrainNodeResponse>, Status> {
        self.tokens.check(request.metadata(), Role::Admin)?;
        let node_id = request.into_inner().node_id;
        check_node_id(&node_id).map_err(invalid)?;
        let found = control::request_drain(self.searches.queue().pool(), &node_id)
            .await
            .map_err(status)?;
        info!(node.id = %node_id, found, "drain requested");
        Ok(Response::new(pb::DrainNodeResponse { found }))
    }

    async fn lift_quarantine(
        &self,
        request: Request<pb::LiftQuarantineRequest>,
    ) -> Result<Response<pb::LiftQuarantineResponse>, Status> {
        self.tokens.check(request.metadata(), Role::Admin)?;
        let node_id = request.into_inner().node_id;
        check_node_id(&node_id).map_err(invalid)?;
        let lifted = crate::node_session::lift_quarantine(self.searches.queue().pool(), &node_id)
            .await
            .map_err(|e| status(crate::error::Error::from(e)))?;
        info!(node.id = %node_id, lifted, "quarantine lifted by an operator");
        Ok(Response::new(pb::LiftQuarantineResponse { lifted }))
    }
}

/// The same rule as `Hello.node_id`: 1..=128 of `[A-Za-z0-9._-]`.
fn check_node_id(id: &str) -> Result<(), FieldError> {
    if id.is_empty() || id.len() > 128 {
        return Err(FieldError::new("node_id", "must be 1..=128 characters"));
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Err(FieldError::new(
            "node_id",
            "only letters, digits, '.', '_' and '-' are allowed",
        ));
    }
    Ok(())
}

/// The ops snapshot on the wire.
fn client_ops_to_pb(c: &ClientOps) -> pb::ClientOps {
    pb::ClientOps {
        client: c.client.clone(),
        searches_last_hour: c.searches_last_hour,
        active_searches: c.active_searches,
        queued_jobs: c.queued_jobs,
        running_jobs: c.running_jobs,
        spend_usd_last_hour: c.spend_usd_last_hour,
        limits: None,
    }
}

fn limits_to_pb(s: &LimitState) -> pb::ClientLimitState {
    pb::ClientLimitState {
        rate_calls: s.limit.rate.map_or(0, |r| r.calls),
        rate_per: s.limit.rate.map(|r| duration_to_pb(r.per)),
        rate_available: s.rate_available.unwrap_or(0.0),
        max_calls_in_progress: s.limit.concurrent.unwrap_or(0),
        calls_in_progress: s.calls_in_progress,
    }
}

pub fn ops_to_pb(s: &OpsSnapshot) -> pb::OpsSnapshot {
    let q = &s.queue;
    let f = &s.fleet;
    let count = |state: JobState, count: i64| pb::StateCount {
        state: pb::JobState::from(state) as i32,
        count,
    };
    let malls = q
        .malls
        .iter()
        .map(|m| {
            let fleet = f.malls.iter().find(|fm| fm.mall == m.mall);
            pb::MallOps {
                mall: m.mall.clone(),
                queued: m.queued,
                running: m.running,
                max_running: m.max_running.unwrap_or(0),
                min_start_gap: Some(duration_to_pb(m.min_start_gap)),
                blocks_last_hour: fleet.map_or(0, |fm| fm.blocks_last_hour),
                ports_cooling: fleet.map_or(0, |fm| fm.ports_cooling),
                finished_attempts_15m: m.finished_15m,
                layout_failures_15m: m.layout_failures_15m,
                layout_share_15m: m.layout_share_15m(),
                spend_usd_last_hour: m.spend_usd_last_hour,
                spend_cap_hourly_usd: m.spend_cap_hourly_usd.unwrap_or(0.0),
                spend_capped: m.spend_capped,
                ports_available: fleet.map_or(0, |fm| fm.ports_available),
                ports_available_pct: f.pct(fleet.map_or(0, |fm| fm.ports_available)),
                enabled: fleet.is_some_and(|fm| fm.enabled),
            }
        })
        .collect();
    pb::OpsSnapshot {
        at: Some(timestamp_to_pb(s.at)),
        jobs: vec![
            count(JobState::Queued, q.queued),
            count(JobState::Running, q.running),
            count(JobState::Done, q.done),
            count(JobState::Dead, q.dead),
            count(JobState::Cancelled, q.cancelled),
        ],
        oldest_queued_age: Some(duration_to_pb(q.oldest_queued.unwrap_or(Duration::ZERO))),
        dead_last_hour: q.dead_last_hour,
        stuck_running: q.stuck_running,
        deadline_kills_last_hour: q.deadline_kills_last_hour,
        cost_usd_last_hour: q.cost_usd_last_hour,
        blocks_last_hour: f.blocks_last_hour,
        proxy_ports_total: f.ports_total,
        proxy_ports_available: f.ports_available,
        proxy_ports_available_pct: f.ports_available_pct(),
        proxy_ports_available_min: f.ports_available_min(),
        proxy_ports_available_min_mall: f.lowest_mall().map(|m| m.mall.clone()).unwrap_or_default(),
        proxy_ports_available_min_pct: f.ports_available_min_pct(),
        block_ended_sessions_6h: f.block_ended_sessions_6h,
        nodes_connected: f.nodes_connected,
        nodes_quarantined: f.nodes_quarantined,
        free_slots: f.free_slots,
        malls,
        alerts: s
            .alerts
            .iter()
            .map(|a| pb::AlertState {
                rule: a.rule.clone(),
                firing: a.firing,
                value: a.value,
                threshold: a.threshold,
                since: Some(timestamp_to_pb(a.since)),
            })
            .collect(),
        spend_cap_hourly_usd: q.spend_cap_hourly_usd.unwrap_or(0.0),
        spend_capped: q.spend_capped,
        clients: s.clients.iter().map(client_ops_to_pb).collect(),
        schedules_active: s.schedules.active,
        schedules_paused: s.schedules.paused,
        schedules_waiting: s.schedules.waiting,
        schedules_failing: s.schedules.failing,
        scope_client: String::new(),
        profile_sets: s
            .profile_sets
            .iter()
            .map(|p| pb::ProfileSetOps {
                coordinator_id: p.coordinator_id.clone(),
                revision: p.revision.clone(),
                loaded_at: Some(timestamp_to_pb(p.loaded_at)),
                refused_revision: p.refused_revision.clone().unwrap_or_default(),
                refused_error: p.refused_error.clone().unwrap_or_default(),
                refused_at: p.refused_at.map(timestamp_to_pb),
            })
            .collect(),
        deliveries_pending: s.deliveries.pending,
        deliveries_dead: s.deliveries.dead,
        deliveries_delivered_last_hour: s.deliveries.delivered_last_hour,
        oldest_pending_delivery_age: Some(duration_to_pb(
            s.deliveries.oldest_pending.unwrap_or(Duration::ZERO),
        )),
    }
}

/// Default and largest page of the fleet lists.
const DEFAULT_FLEET_PAGE: u32 = 100;
const MAX_FLEET_PAGE: u32 = 1000;

/// One page of `items` (sorted by `key`): those after `after`, and the token of the next
/// page (empty when this one is the last).
fn page_of<'a, T>(
    items: &'a [T],
    key: impl Fn(&T) -> String,
    after: Option<&str>,
    page_size: u32,
    list: &str,
) -> (&'a [T], String) {
    let size = paging::page_size(page_size, DEFAULT_FLEET_PAGE, MAX_FLEET_PAGE) as usize;
    let start = after.map_or(0, |after| {
        items.partition_point(|i| key(i).as_str() <= after)
    });
    let end = (start + size).min(items.len());
    let page = &items[start..end];
    let next = match page.last() {
        Some(last) if end < items.len() => paging::encode(list, "", &key(last)),
        _ => String::new(),
    };
    (page, next)
}

fn node_to_pb(n: &NodeInfo) -> pb::NodeInfo {
    pb::NodeInfo {
        node_id: n.node_id.clone(),
        session_id: n.session_id.to_string(),
        version: n.version.clone(),
        slots: n.slots,
        free_slots: n.free_slots,
        running_jobs: n.running_jobs.clone(),
        malls: n.malls.clone(),
        connected_at: Some(timestamp_to_pb(n.connected_at)),
        last_seen_at: Some(timestamp_to_pb(n.last_seen_at)),
        draining: n.draining,
        coordinator: n.coordinator_id.clone(),
        quarantined_until: n.quarantined_until.map(timestamp_to_pb),
        quarantine_reason: n.quarantine_reason.clone().unwrap_or_default(),
    }
}

fn port_state_to_pb(s: PortState) -> pb::PortState {
    match s {
        PortState::Available => pb::PortState::Available,
        PortState::Leased => pb::PortState::Leased,
        PortState::Resting => pb::PortState::Resting,
        PortState::Cooling => pb::PortState::Cooling,
        // NB: ListProxyPorts lists enabled ports only.
        PortState::Disabled => pb::PortState::Unspecified,
    }
}

#[allow(deprecated)] // `state`: for older clients
fn port_to_pb(p: &ProxyPortInfo) -> pb::ProxyPortInfo {
    pb::ProxyPortInfo {
        host: p.host.clone(),
        port: u32::from(p.port),
        state: p.state.as_str().to_owned(),
        port_state: port_state_to_pb(p.state) as i32,
        holder_node: p.holder_node.clone().unwrap_or_default(),
        leased_until: p.leased_until.map(timestamp_to_pb),
        rest_until: p.rest_until.map(timestamp_to_pb),
        cooldown_until: p.cooldown_until.map(timestamp_to_pb),
        cooling_malls: p.cooling_malls.clone(),
        last_used_at: p.last_used_at.map(timestamp_to_pb),
        use_count: p.use_count,
        burn_count: p.burn_count,
        last_reason: p.last_reason.clone().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids_are_checked() {
        assert!(check_node_id("node-1.a_b").is_ok());
        assert_eq!(check_node_id("").unwrap_err().field, "node_id");
        assert_eq!(check_node_id("a b").unwrap_err().field, "node_id");
        assert!(check_node_id(&"n".repeat(129)).is_err());
    }
}
