//! NodeService adapter (being written).
