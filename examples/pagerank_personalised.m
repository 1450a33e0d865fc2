function R = pagerank_personalised(M, S, d)
  % Personalised PageRank for p seed distributions at once: column c of S (n×p) is the
  % teleport distribution of seed set c; R(:, c) is its converged rank vector.
  %#linview dims M(n,n) S(n,p)
  %#linview scalar d
  %#linview stochastic M
  %#linview dynamic M S
  %#linview tolerance 1e-10
  n = size(M, 1);
  R = (eye(n) - d * M) \ ((1 - d) * S);
end
