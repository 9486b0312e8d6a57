"""The bundled studies: ties-coach (the core paper's coach x tie-scoring study and its claims),
the fork studies (soc-strategy, misinformation), the information cocoon and the moderation
strategies."""
