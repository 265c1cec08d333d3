//! Resolution: channel graphs, upgrade edges, dependencies; a pure function with explanations.
