function r = pagerank_solve(M, d)
  % PageRank as users write it: the converged rank vector, not a fixed number of steps.
  % M is the column-stochastic link matrix (a dangling page is a uniform column).
  %#linview dims M(n,n)
  %#linview scalar d
  %#linview stochastic M
  %#linview tolerance 1e-10
  n = size(M, 1);
  r = (eye(n) - d * M) \ ((1 - d) / n * ones(n, 1));
end
