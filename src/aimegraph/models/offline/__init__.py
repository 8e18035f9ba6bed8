"""Stand-in chat models for tests, the offline demo and the eval: the scripted model
(:mod:`.scripted`, its scenario files :mod:`.scenario`, its ``echo`` mode
:mod:`.echo`), the fuzz model that bends replies as real models do (:mod:`.fuzz`),
and the teaching model for the optimiser (:mod:`.teaching`). Each is a LangChain
``BaseChatModel`` that calls no provider."""
