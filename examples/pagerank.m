% PAGERANK  Ten steps of damped power iteration.
%   M is a column-stochastic link matrix (M(i,j) = probability of moving
%   from page j to page i), d the damping factor (e.g. 0.85) and r0 the
%   starting rank vector:  r <- d*M*r + (1-d)/n * ones(n,1).

function r = pagerank(M, r0, d)
  %#linview dims M(n,n) r0(n,1)
  %#linview scalar d
  %#linview dynamic M
  n = size(M, 1);
  r = r0;
  for i = 1:10
    r = d * M * r + (1 - d) / n * ones(n, 1);
  end
end
