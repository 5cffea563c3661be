"""The session layer: plan a session, build it, serialise its runs, check feeds, bind IO,
describe it; nothing here knows about candidates or serving."""
