function [x, k] = jacobi_groups(A, b)
  % Jacobi sweeps in groups of three until the residual is small (a loop inside a while)
  % test inputs: A=diagdom(6) b=randn(6,1)
  d = diag(A);
  R = A - diag(d);
  x = zeros(rows(A), 1);
  k = 0;
  while norm(A * x - b) > 1e-9 * norm(b)
    for i = 1:3
      x = (b - R * x) ./ d;
    end
    k = k + 1;
  end
end
